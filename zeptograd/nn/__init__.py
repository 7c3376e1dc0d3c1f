"""Neural-network layers (zeptograd.nn), optimizers (zeptograd.nn.optim) and model state (zeptograd.nn.state)."""
