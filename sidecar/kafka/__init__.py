"""aiokafka adapters: they translate Kafka into calls on the sans-I/O core and back."""
