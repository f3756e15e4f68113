"""URLs of registered servers."""

from django.urls import path

from replication_admin.servers import views as servers

urlpatterns = [
    path("servers/", servers.server_list, name="servers"),
    path("servers/add/", servers.server_add, name="servers-add"),
    path("servers/test/", servers.server_test_form, name="servers-test"),
    path("servers/<str:name>/", servers.server_detail, name="servers-detail"),
    path("servers/<str:name>/edit/", servers.server_edit, name="servers-edit"),
    path("servers/<str:name>/delete/", servers.server_delete, name="servers-delete"),
    path("servers/<str:name>/check/", servers.server_check, name="servers-check"),
    path("servers/<str:name>/tables/", servers.server_tables, name="servers-tables"),
    path("servers/<str:name>/tables/<path:table>/", servers.server_table, name="servers-table"),
]
