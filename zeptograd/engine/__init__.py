"""Engine: realize tensors (schedule, compile, run) and keep live tensors pointing at what was computed."""
