"""Django forms of the dashboard pages."""
