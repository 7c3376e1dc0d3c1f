"""Runtime: devices, their buffers, compilers and program runners."""
