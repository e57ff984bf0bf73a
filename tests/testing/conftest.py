# The sample project is run by test_plugin.py in its own pytest process, with the plugin loaded.
collect_ignore = ["plugin_project"]
