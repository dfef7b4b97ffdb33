"""optiq: plan and replay multipath data movement on supercomputer interconnects."""
