import pipelines.evaluate.run as evaluation
from pipelines.options import main

if __name__ == "__main__":
    main("pipelines.evaluate", evaluation.Config, evaluation.run, evaluation.__doc__)
