"""rackforge lab hardware simulator (SIMULATION, not a driver): one module per concern."""
