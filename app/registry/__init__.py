"""The model registry: named models, their numbered versions, movable aliases and history."""
