"""normalization operators (filled in by the operator issues)."""
__all__ = []
