// andes dashboard: refreshes each part of the page marked data-live from its
// URL every two seconds, and draws the last hour's plots with uPlot.
'use strict';
(function () {
  var stateEl = document.getElementById('live-state');
  function say(text, bad) {
    if (stateEl) {
      stateEl.textContent = text;
      stateEl.className = bad ? 'bad' : 'ok';
    }
  }
  function get(url) {
    return fetch(url, { credentials: 'same-origin', cache: 'no-store' }).then(function (r) {
      if (r.status === 401) {
        say('logged out: open the URL the dashboard printed', true);
        return null;
      }
      if (!r.ok) {
        say('the dashboard answered ' + r.status, true);
        return null;
      }
      return r;
    });
  }
  var busy = false;
  function refresh() {
    if (busy) { return; }
    var parts = document.querySelectorAll('[data-live]');
    busy = true;
    var pending = [];
    Array.prototype.forEach.call(parts, function (el) {
      pending.push(get(el.getAttribute('data-live')).then(function (r) {
        return r ? r.text() : null;
      }).then(function (text) {
        if (text !== null) {
          // Server-rendered HTML: every value in it is escaped there. Replaced
          // only when it changed, so a selection in a page at rest stays.
          if (text !== el.andesShown) {
            el.innerHTML = text;
            el.andesShown = text;
          }
          say('live · ' + new Date().toLocaleTimeString(), false);
        }
      }));
    });
    Promise.all(pending).catch(function () {
      say('the dashboard cannot be reached', true);
    }).then(function () { busy = false; });
  }
  if (document.querySelector('[data-live]')) {
    setInterval(refresh, 2000);
  }

  var charts = {};
  function plot(id, label, xs, ys, color) {
    var el = document.getElementById(id);
    if (!el || typeof uPlot === 'undefined') { return; }
    var data = [xs, ys];
    if (charts[id]) {
      charts[id].setData(data);
      return;
    }
    var box = el.closest('.charts');
    var room = box ? Math.floor((box.clientWidth - 40) / 2) : 560;
    charts[id] = new uPlot({
      width: Math.max(320, room),
      height: 200,
      scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, Math.max(1, max)]; } } },
      series: [{}, { label: label, stroke: color, width: 2, points: { show: false } }],
      axes: [{}, { size: 50 }]
    }, data, el);
  }
  function series() {
    get('api/series').then(function (r) { return r ? r.json() : null; }).then(function (s) {
      if (!s || !s.t) { return; }
      plot('throughput', 'completed / min', s.t, s.completed, '#1b7f4c');
      plot('depth', 'idle + running + held', s.t, s.depth, '#2357a6');
    }).catch(function () {});
  }
  if (document.getElementById('throughput')) {
    series();
    setInterval(series, 10000);
  }
})();
