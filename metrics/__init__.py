"""SafeRLEval evaluation engine: safety metrics, IQM with stratified-bootstrap CIs, tiers and cost CDFs from episode tables."""
