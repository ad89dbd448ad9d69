"""What a scenario may say: the validated schema, plugin names, the static estimate and the reference.

Above the components (whose configs it gathers), below launching (which runs what it accepts).
"""
