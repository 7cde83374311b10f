"""Kernel auto-tuning on a simulated GPU (HypoGPU): Triton-style autotune, grid and
random search, AutoTVM and Ansor tuners and a task scheduler."""
