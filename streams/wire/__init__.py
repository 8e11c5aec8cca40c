"""What every process that talks to Kafka shares: record formats, broker addresses, the Kafka client's log limits."""
