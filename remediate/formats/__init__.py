"""Pure, typed parsers and encoders for every Kafka format this project reads or writes."""
