# The sample projects are run by test_plugin.py and test_security_fixtures.py, each in its own
# pytest process with the plugin loaded.
collect_ignore = ["plugin_project", "secure_project"]
