"""The modelling language: random variables, their constructors, the tracer
stack, program transformations, extra log-density terms, support bijectors
and dtypes."""
