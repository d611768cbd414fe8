"""The research record: each result folder with its runs, figures and probe scripts, and the tools
that turn finished runs into those figures (``experiments.tools``). It imports ``torchrl_glam``;
the package never imports it, and the wheel does not ship it."""
