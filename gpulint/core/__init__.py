"""The small values every part of gpulint passes around."""
