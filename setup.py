"""Builds the C extensions: the sidecar's merge kernel (sidecar/core/_kernel_queue.pyx,
_kernel_take.pyx, _kernel_taken.pyx), its output encoder (sidecar/output/_stamp_encoder.pyx), its
fetched-record reader (sidecar/kafka/_fetched.pyx, over the v2 record decoder sidecar/kafka/_records.pyx),
and the wire layer's plans: the Avro skip plan, the JSON path scanner and the Protobuf plan
(timesync_wire/formats/_avro_plan.pyx, _json_scan.pyx, _protobuf_plan.pyx; each has a pure-Python
specification that runs when it is not built).

Everything else is declared in pyproject.toml. The extensions are optional: without a C compiler
the install still succeeds and the sidecar stamps in pure Python and reads aiokafka's own
``ConsumerRecord`` s (same output, slower); it logs which paths it uses at start and ``/status``
says so.
"""

import os

from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = cythonize(
    [
        Extension("sidecar.core._kernel_queue", ["sidecar/core/_kernel_queue.pyx"]),
        Extension("sidecar.core._kernel_taken", ["sidecar/core/_kernel_taken.pyx"]),
        Extension("sidecar.core._kernel_take", ["sidecar/core/_kernel_take.pyx"]),
        Extension("sidecar.output._stamp_encoder", ["sidecar/output/_stamp_encoder.pyx"]),
        Extension("sidecar.kafka._records", ["sidecar/kafka/_records.pyx"]),
        Extension("sidecar.kafka._fetched", ["sidecar/kafka/_fetched.pyx"]),
        Extension("timesync_wire.formats._avro_plan", ["timesync_wire/formats/_avro_plan.pyx"]),
        Extension("timesync_wire.formats._json_scan", ["timesync_wire/formats/_json_scan.pyx"]),
        Extension("timesync_wire.formats._protobuf_plan", ["timesync_wire/formats/_protobuf_plan.pyx"]),
    ],
    compiler_directives={"language_level": "3"},
    nthreads=os.cpu_count() or 1,
)
# cythonize() rebuilds the Extension objects and drops ``optional``: set it on what it returns.
for extension in extensions:
    extension.optional = True

setup(ext_modules=extensions, options={"build_ext": {"parallel": os.cpu_count() or 1}})
