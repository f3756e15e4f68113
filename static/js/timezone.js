// Tells the console the browser's time zone, so times are shown in it (the UTC value stays on hover).
(function () {
  var zone;
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { return; }
  if (!zone) { return; }
  var current = document.cookie.split("; ").find(function (c) { return c.indexOf("tz=") === 0; });
  if (current !== "tz=" + encodeURIComponent(zone)) {
    document.cookie = "tz=" + encodeURIComponent(zone) + "; path=/; max-age=31536000; SameSite=Lax";
  }
})();
