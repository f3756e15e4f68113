"""The compare form: two tables, each on a registered server."""

from __future__ import annotations

from django import forms

from replication_admin.models import Server


class CompareForm(forms.Form):
    left_server = forms.ModelChoiceField(queryset=Server.objects.all(), to_field_name="name")
    left_table = forms.CharField(max_length=255)
    right_server = forms.ModelChoiceField(queryset=Server.objects.all(), to_field_name="name")
    right_table = forms.CharField(max_length=255)
