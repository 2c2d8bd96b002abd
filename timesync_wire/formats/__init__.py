"""Value formats: how event time is read from a value of each format.

Today: the plans of issue 33, each a pure-Python specification with a C twin held to it —
:mod:`.json_scan` (a path in a JSON document, found without building objects) and
:mod:`.protobuf_plan` (a path in a Protobuf body, walked from descriptors). The ``ValueFormat``
contract and the ``FORMATS`` table join them when the wire layer moves here.
"""
