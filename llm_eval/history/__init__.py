"""Side feature: the gated metrics over time. The series record and its points, reading
baselines from git and kept reports, the dashboard's model and the renderings of
both."""
