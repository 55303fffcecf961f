"""k8sim, the lab's Kubernetes stand-in (SIMULATION), by concern; lab/k8sim/k8sim.py is its entry point."""
