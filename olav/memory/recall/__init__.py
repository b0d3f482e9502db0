"""What reaches the model: selection, the relevance decision, calibration, the second opinion
and look, the rendered block, episodes and lessons."""
