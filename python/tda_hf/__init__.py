"""tda GPT-2 export: PyTorch model of all eleven attention mechanisms (see modeling_tda.py)."""
