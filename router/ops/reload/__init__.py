"""Live config: the file watcher, the per-model diff and the single-flight reloader."""
