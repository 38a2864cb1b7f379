"""ssm-bench: state-tracking benchmarks for diagonal SSMs, RNNs and their relatives."""
