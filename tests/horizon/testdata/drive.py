"""Drive Horizon with the blazar-dashboard plugin in headless Chromium.

Run by horizon_test.go, one phase per run:

  drive.py PHASE --url URL --user U --password P --shots DIR [--host H]
           [--lease-name N] [--lease-id ID] [--start S --end E]

Phases:
  admin-hosts    log in as the admin; create host H through the Create Hosts
                 form, update its extra capabilities, delete it.
  member-create  log in as a member; create a host lease through the Create
                 Lease form and find it in the list.
  member-rest    log in as the member; open the lease detail and the Host
                 Calendar, update the lease, delete it.

Every page visited is saved as a PNG in --shots. The last line of stdout
is a JSON object with what the phase found (e.g. the new lease's id).
Every wait is bounded (WAIT seconds); any failure exits non-zero with a
screenshot named after the step.
"""

import argparse
import json
import os
import re
import shutil
import tempfile
import time

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

WAIT = 30


class Driver:
    def __init__(self, args):
        self.args = args
        self.n = 0
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        opts = webdriver.ChromeOptions()
        opts.binary_location = "/usr/bin/chromium"
        for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                  "--disable-gpu", "--window-size=1400,1000",
                  "--user-data-dir=" + self.profile):
            opts.add_argument(a)
        self.d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        self.d.set_page_load_timeout(WAIT)
        self.d.set_script_timeout(WAIT)

    def shot(self, name):
        self.n += 1
        path = os.path.join(self.args.shots, "%s-%02d-%s.png" % (self.args.phase, self.n, name))
        self.d.save_screenshot(path)
        print("screenshot", path, flush=True)

    def wait(self, cond, what):
        try:
            return WebDriverWait(self.d, WAIT).until(cond)
        except TimeoutException:
            self.shot("timeout")
            with open(os.path.join(self.args.shots, "%s-timeout.html" % self.args.phase), "w") as f:
                f.write(self.d.page_source)
            raise SystemExit("timed out (%ds) waiting for %s at %s\n%s" % (
                WAIT, what, self.d.current_url, self.messages()))

    def get(self, path, name):
        self.d.get(self.args.url + path)
        self.wait(lambda d: d.execute_script("return document.readyState") == "complete", "page " + path)
        self.shot(name)
        self.no_error(name)

    def messages(self):
        return "\n".join(e.text for e in self.d.find_elements(By.CSS_SELECTOR, ".alert, .messages"))

    def no_error(self, where):
        errs = [e.text for e in self.d.find_elements(By.CSS_SELECTOR, ".alert-danger, .alert-error")
                if e.text.strip()]
        if errs:
            raise SystemExit("%s: Horizon shows an error: %s" % (where, " | ".join(errs)))

    def success(self, where, text):
        self.wait(EC.presence_of_element_located((By.CSS_SELECTOR, ".alert-success")), "a success message after " + where)
        self.shot(where)
        msg = self.messages()
        self.no_error(where)
        if text not in msg:
            raise SystemExit("%s: messages %r, want %r" % (where, msg, text))

    def login(self, next_path):
        # Straight to the panel under test: the default landing page
        # (project overview) asks Nova for usage the stub does not have.
        self.get("/auth/login/?next=" + next_path, "login")
        self.d.find_element(By.ID, "id_username").send_keys(self.args.user)
        self.d.find_element(By.ID, "id_password").send_keys(self.args.password)
        self.d.find_element(By.ID, "loginBtn").click()
        self.wait(lambda d: d.current_url.endswith(next_path), "the login to finish at " + next_path)
        self.shot("logged-in")
        self.no_error("login")

    def submit(self, form_css):
        form = self.d.find_element(By.CSS_SELECTOR, form_css)
        btn = form.find_elements(By.CSS_SELECTOR, "[type=submit]")
        btn[-1].click()

    def set_text(self, id_, value):
        e = self.wait(EC.presence_of_element_located((By.ID, id_)), "field " + id_)
        self.d.execute_script("arguments[0].value = arguments[1];", e, value)

    def check_row(self, value):
        # The theme hides the real checkbox behind a styled label; tick it
        # as the label's click would.
        box = self.d.find_element(By.CSS_SELECTOR, "input[type=checkbox][value='%s']" % value)
        self.d.execute_script("arguments[0].click();", box)
        if not box.is_selected():
            raise SystemExit("row %s could not be selected" % value)

    def row_with(self, text):
        return [r for r in self.d.find_elements(By.CSS_SELECTOR, "table tbody tr") if text in r.text]

    def quit(self):
        self.d.quit()
        shutil.rmtree(self.profile, ignore_errors=True)


def admin_hosts(dr, a):
    dr.login("/admin/hosts/")
    dr.get("/admin/hosts/create/", "create-hosts")
    # The Select Hosts step lists the hypervisors Nova reports that are
    # not hosts yet; pick ours as a person would, with the widget's button.
    add = dr.wait(EC.element_to_be_clickable(
        (By.XPATH, "//ul[contains(@class,'available_select_hosts')]//*[contains(@class,'btn-group')][.//*[normalize-space(text())=%s]]//a[@href='#add_remove']" % json.dumps(a.host))),
        "host %s among the available hypervisors" % a.host)
    add.click()
    dr.wait(EC.presence_of_element_located(
        (By.XPATH, "//ul[contains(@class,'select_hosts_members')]//*[normalize-space(text())=%s]" % json.dumps(a.host))),
        "host %s selected" % a.host)
    dr.shot("host-selected")
    dr.d.find_element(By.CSS_SELECTOR, "a[href='#create_hosts__add_extra_caps']").click()
    dr.set_text("id_extra_caps", json.dumps({"rack": "r1"}))
    dr.shot("extra-caps")
    dr.submit("form")
    dr.success("host-created", "Host %s was successfully created" % a.host)
    rows = dr.row_with(a.host)
    if len(rows) != 1:
        raise SystemExit("hosts table: %d rows with %s" % (len(rows), a.host))
    link = rows[0].find_element(By.LINK_TEXT, a.host)
    host_id = link.get_attribute("href").rstrip("/").split("/")[-1]
    dr.get("/admin/hosts/%s/" % host_id, "host-detail")
    if "r1" not in dr.d.find_element(By.TAG_NAME, "body").text:
        raise SystemExit("host detail does not show the extra capability rack=r1")
    dr.get("/admin/hosts/%s/update" % host_id, "host-update")
    dr.set_text("id_values", json.dumps({"rack": "r2"}))
    dr.submit("form")
    dr.success("host-updated", "Host was successfully updated")
    dr.get("/admin/hosts/%s/" % host_id, "host-detail-updated")
    if "r2" not in dr.d.find_element(By.TAG_NAME, "body").text:
        raise SystemExit("host detail does not show the updated rack=r2")
    dr.get("/admin/hosts/", "hosts-before-delete")
    dr.check_row(host_id)
    dr.d.find_element(By.CSS_SELECTOR, "#hosts__action_delete").click()
    confirm = dr.wait(EC.element_to_be_clickable((By.CSS_SELECTOR, ".modal-footer .btn-danger, .modal-footer .btn-primary")), "the delete confirmation")
    dr.shot("host-delete-confirm")
    confirm.click()
    dr.success("host-deleted", "Deleted")
    if dr.row_with(a.host):
        raise SystemExit("host %s still listed after delete" % a.host)
    return {"host_id": host_id}


def member_create(dr, a):
    dr.login("/project/leases/")
    dr.get("/project/leases/create/", "create-lease")
    dr.d.find_element(By.ID, "id_name").send_keys(a.lease_name)
    dr.d.find_element(By.ID, "id_start_date").send_keys(a.start)
    dr.d.find_element(By.ID, "id_end_date").send_keys(a.end)
    # Physical Host is the default resource type; one host.
    dr.set_text("id_min_hosts", "1")
    dr.set_text("id_max_hosts", "1")
    dr.shot("lease-form")
    dr.submit("form")
    dr.success("lease-created", "Lease %s was successfully created" % a.lease_name)
    rows = dr.row_with(a.lease_name)
    if len(rows) != 1:
        raise SystemExit("leases table: %d rows with %s" % (len(rows), a.lease_name))
    href = rows[0].find_element(By.LINK_TEXT, a.lease_name).get_attribute("href")
    return {"lease_id": href.rstrip("/").split("/")[-1]}


def member_rest(dr, a):
    dr.login("/project/leases/%s/" % a.lease_id)
    body = dr.d.find_element(By.TAG_NAME, "body").text
    for want in (a.lease_name, a.lease_id, "physical:host"):
        if want not in body:
            raise SystemExit("lease detail lacks %r" % want)
    dr.get("/project/leases/calendar/host/", "host-calendar")
    # The calendar page fetches its data from resources.json; wait for
    # the chart it draws from it.
    dr.wait(EC.presence_of_element_located((By.CSS_SELECTOR, "#blazar-calendar-host .apexcharts-canvas, .apexcharts-canvas")), "the host calendar chart")
    time.sleep(0.5)  # let the chart finish its animation for the screenshot
    dr.shot("host-calendar-drawn")
    dr.no_error("host-calendar")
    # The chart is drawn from this document: the lease's host is a row and
    # the lease's window is on it.
    data = dr.d.execute_async_script(
        "var done = arguments[arguments.length - 1];"
        "fetch('resources.json', {credentials: 'same-origin'})"
        ".then(function (r) { return r.json(); }).then(done, function (e) { done({error: String(e)}); });")
    rows = [r.get("hypervisor_hostname") for r in data.get("resources", [])]
    want = a.start.replace(" ", "T")
    on_host = [r for r in data.get("reservations", [])
               if r.get("hypervisor_hostname") == a.host and str(r.get("start_date", "")).startswith(want)]
    if a.host not in rows or len(on_host) != 1:
        raise SystemExit("calendar data %r: want row %s and one reservation on it from %s" % (data, a.host, want))
    new_name = a.lease_name + "-renamed"
    dr.get("/project/leases/%s/update" % a.lease_id, "lease-update")
    dr.set_text("id_lease_name", new_name)
    dr.set_text("id_end_time", "+1h")
    dr.submit("form")
    dr.success("lease-updated", "Lease update started")
    dr.get("/project/leases/", "leases-after-update")
    rows = dr.row_with(new_name)
    if len(rows) != 1:
        raise SystemExit("leases table: %d rows with %s" % (len(rows), new_name))
    dr.check_row(a.lease_id)
    dr.d.find_element(By.CSS_SELECTOR, "#leases__action_delete").click()
    confirm = dr.wait(EC.element_to_be_clickable((By.CSS_SELECTOR, ".modal-footer .btn-danger, .modal-footer .btn-primary")), "the delete confirmation")
    dr.shot("lease-delete-confirm")
    confirm.click()
    dr.success("lease-deleted", "Deleted")
    if dr.row_with(new_name):
        raise SystemExit("lease %s still listed after delete" % new_name)
    return {"renamed": new_name}


def member_instance(dr, a):
    """Create an instance lease (2 instances, affinity) through the Create
    Lease form, open its detail, delete it from the table."""
    dr.login("/project/leases/")
    dr.get("/project/leases/create/", "create-instance-lease")
    dr.d.find_element(By.ID, "id_name").send_keys(a.lease_name)
    dr.d.find_element(By.ID, "id_start_date").send_keys(a.start)
    dr.d.find_element(By.ID, "id_end_date").send_keys(a.end)
    # The themable selects hide the real <select>: set it and let the
    # switchable fields follow its change event.
    for field, value in (("id_resource_type", "instance"), ("id_affinity", "True")):
        dr.d.execute_script(
            "var s = document.getElementById(arguments[0]); s.value = arguments[1];"
            "if (window.jQuery) { jQuery(s).trigger('change'); } else { s.dispatchEvent(new Event('change')); }",
            field, value)
    dr.wait(EC.visibility_of_element_located((By.ID, "id_amount")), "the instance fields")
    dr.set_text("id_amount", "2")
    dr.set_text("id_vcpus", "1")
    dr.set_text("id_memory_mb", "1024")
    dr.set_text("id_disk_gb", "10")
    dr.shot("instance-lease-form")
    dr.submit("form")
    dr.success("instance-lease-created", "Lease %s was successfully created" % a.lease_name)
    rows = dr.row_with(a.lease_name)
    if len(rows) != 1:
        raise SystemExit("leases table: %d rows with %s" % (len(rows), a.lease_name))
    href = rows[0].find_element(By.LINK_TEXT, a.lease_name).get_attribute("href")
    lease_id = href.rstrip("/").split("/")[-1]
    dr.get("/project/leases/%s/" % lease_id, "instance-lease-detail")
    body = dr.d.find_element(By.TAG_NAME, "body").text
    for want in (a.lease_name, lease_id, "virtual:instance", "flavor_id"):
        if want not in body:
            raise SystemExit("instance lease detail lacks %r" % want)
    dr.no_error("instance-lease-detail")
    dr.get("/project/leases/", "leases-before-instance-delete")
    dr.check_row(lease_id)
    dr.d.find_element(By.CSS_SELECTOR, "#leases__action_delete").click()
    confirm = dr.wait(EC.element_to_be_clickable((By.CSS_SELECTOR, ".modal-footer .btn-danger, .modal-footer .btn-primary")), "the delete confirmation")
    confirm.click()
    dr.success("instance-lease-deleted", "Deleted")
    if dr.row_with(a.lease_name):
        raise SystemExit("lease %s still listed after delete" % a.lease_name)
    return {"lease_id": lease_id}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("phase", choices=["admin-hosts", "member-create", "member-rest", "member-instance"])
    for f in ("url", "user", "password", "shots"):
        p.add_argument("--" + f, required=True)
    for f in ("host", "lease-name", "lease-id", "start", "end"):
        p.add_argument("--" + f, default="")
    a = p.parse_args()
    dr = Driver(a)
    try:
        out = {"admin-hosts": admin_hosts, "member-create": member_create,
               "member-rest": member_rest, "member-instance": member_instance}[a.phase](dr, a)
    except SystemExit:
        try:
            dr.shot("failed")
        except Exception:
            pass
        raise
    finally:
        dr.quit()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
