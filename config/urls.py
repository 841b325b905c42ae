"""Top-level URLs: the dashboard, accounts, the admin and the API."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

# Sign in, sign out and change one's password; no e-mailed password reset (operators are
# reset by an administrator in the admin): the reset pages tried SMTP on localhost:25.
accounts = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("password_change/done/", auth_views.PasswordChangeDoneView.as_view(),
         name="password_change_done"),
]

urlpatterns = [
    path("accounts/", include(accounts)),
    path("admin/", admin.site.urls),
    path("api/", include("dashboard.api.urls")),
    # LangGraph's server API: get_client(url="http://host:port/langgraph", api_key=TOKEN)
    path("langgraph/", include("dashboard.lgserver.urls")),
    # pages name their icon; this answers browsers and tools that ask the root anyway
    path("favicon.ico", login_not_required(RedirectView.as_view(
        url=static("planwatch/favicon.svg"), permanent=True))),
    path("", include("dashboard.web.urls")),
]

handler400 = "dashboard.web.views.errors.bad_request"
