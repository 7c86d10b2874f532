"""The pieces of `mambawin build`: build key, workspace, environment, compile."""
