"""The lab's page and its HTTP API (``cronlab lab``): the model, the real code simulated, and
live runs of the real engine, side by side. Above the engine; its assets are ``web/static``."""
