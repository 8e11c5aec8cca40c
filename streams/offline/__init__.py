"""The engine without a broker: replay of event files and conformance scenarios, all states in one store."""
