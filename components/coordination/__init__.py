"""How runs on one root take turns and tell how they ended: the lease, the run lease, the backends' job states, a
compiled run's outcome, and the notification."""
