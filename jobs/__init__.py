"""PySpark jobs: data-plane work, free of Django. Each job takes plain plans and JDBC endpoints."""
