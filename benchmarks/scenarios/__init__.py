"""One module per scenario of issue 6; each exposes `run(plan, workdir) -> ScenarioResult`."""
