"""What every process that talks to Kafka shares: record formats, record keys and their partitions, the verdict record, broker addresses, the Kafka client's log limits and outage handling."""
