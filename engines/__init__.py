"""Engine side of rapid-mlx: one worker process per local model, driven over IPC."""
