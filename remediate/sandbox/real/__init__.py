"""Real Apache Kafka in the sandbox: the releases it runs (releases.py), their jars from Maven
Central (kafka_jars.py), a broker's settings and command line (jvm_broker.py), and
confluent-kafka as the client (kafka_client.py)."""
