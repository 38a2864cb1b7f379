"""Recurrent layers, one module per family. Each maps (batch, time, d) to (batch, time, d)."""
