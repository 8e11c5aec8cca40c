"""What agent runners use to ask loopwatch for a verdict."""
