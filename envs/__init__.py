"""Safe navigation tasks behind one functional JAX API: built-in pure-JAX tasks and a CRAX adapter."""
