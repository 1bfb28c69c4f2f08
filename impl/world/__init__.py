"""What the kernel observes and acts on: the environment (git, processes, the clock) and the hook every durable boundary passes through."""
