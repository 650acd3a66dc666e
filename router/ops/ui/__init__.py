"""The status page (``/ui``): the fleet at a glance, and the operator's few actions."""
