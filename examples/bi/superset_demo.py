"""Apache Superset on pitstop serve, driven as an analyst would, through Superset's own REST API:
add pitstop as a PostgreSQL database, register a sink table as a dataset, draw a bar chart of it,
run ``SHOW JOBS`` (and, with --drop, ``DROP JOB ... WITH SNAPSHOT``) in SQL Lab, and take a
screenshot of the chart in headless Chromium.

    python examples/bi/superset_demo.py --superset http://127.0.0.1:8089 \\
        --pitstop postgresql+psycopg2://analyst@127.0.0.1:55422/pitstop --table daily_revenue \\
        --screenshot examples/work/superset_chart.png

Runs with Superset's own Python (it needs requests and selenium, which Superset installs).
Exits non-zero with the step that failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import requests


class Superset:
    def __init__(self, base: str, user: str, password: str) -> None:
        self.base = base.rstrip("/")
        self.http = requests.Session()
        answer = self.http.post(
            f"{self.base}/api/v1/security/login",
            json={"username": user, "password": password, "provider": "db", "refresh": True},
            timeout=60,
        )
        answer.raise_for_status()
        self.http.headers["Authorization"] = f"Bearer {answer.json()['access_token']}"

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        answer = self.http.request(method, f"{self.base}{path}", timeout=300, **kwargs)
        if answer.status_code >= 400:
            raise SystemExit(f"Superset {method} {path} -> {answer.status_code}: {answer.text[:2000]}")
        return answer.json()


def step(text: str) -> None:
    print(f"-- {text}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--superset", default="http://127.0.0.1:8089")
    parser.add_argument("--user", default="admin")
    parser.add_argument("--password", default="admin")
    parser.add_argument("--pitstop", required=True, help="SQLAlchemy URI of pitstop serve")
    parser.add_argument("--table", default="daily_revenue")
    parser.add_argument("--screenshot", default="examples/work/superset_chart.png")
    parser.add_argument("--drop", metavar="JOB:SNAPSHOT", help="also DROP JOB ... WITH SNAPSHOT in SQL Lab")
    args = parser.parse_args()

    ss = Superset(args.superset, args.user, args.password)
    step("test the connection to pitstop serve")
    ss.call("POST", "/api/v1/database/test_connection/", json={"sqlalchemy_uri": args.pitstop})
    step("add pitstop as a PostgreSQL database")
    existing = ss.call(
        "GET", "/api/v1/database/", params={"q": "(filters:!((col:database_name,opr:eq,value:pitstop)))"}
    )
    if existing["result"]:  # from an earlier run: point it at this server
        database = existing["result"][0]["id"]
        ss.call(
            "PUT", f"/api/v1/database/{database}", json={"sqlalchemy_uri": args.pitstop, "allow_dml": True}
        )
    else:
        created = ss.call(
            "POST",
            "/api/v1/database/",
            json={
                "database_name": "pitstop",
                "sqlalchemy_uri": args.pitstop,
                "expose_in_sqllab": True,
                "allow_dml": True,  # SQL Lab sends DROP JOB ... only to a database that allows DML
                "allow_run_async": False,
            },
        )
        database = created["id"]
    step("list the schemas and tables Superset sees")
    schemas = ss.call("GET", f"/api/v1/database/{database}/schemas/")["result"]
    tables = ss.call(
        "GET", f"/api/v1/database/{database}/tables/", params={"q": "(schema_name:public,force:!t)"}
    )["result"]
    names = sorted(t["value"] for t in tables)
    print(f"schemas: {schemas}; tables in public: {names}")
    if args.table not in names:
        raise SystemExit(f"Superset does not see table {args.table} in schema public")
    step(f"register {args.table} as a dataset")
    found = ss.call(
        "GET", "/api/v1/dataset/", params={"q": f"(filters:!((col:table_name,opr:eq,value:{args.table})))"}
    )
    if found["result"]:
        dataset = found["result"][0]["id"]
    else:
        dataset = ss.call(
            "POST",
            "/api/v1/dataset/",
            json={"database": database, "schema": "public", "table_name": args.table},
        )["id"]
    columns = ss.call("GET", f"/api/v1/dataset/{dataset}")["result"]["columns"]
    print("dataset columns: " + ", ".join(f"{c['column_name']} {c['type']}" for c in columns))
    step("a bar chart: revenue by region")
    metric = {
        "expressionType": "SIMPLE",
        "column": {"column_name": "revenue"},
        "aggregate": "SUM",
        "label": "SUM(revenue)",
    }
    params = {  # Superset 6's bar chart: a category on the x axis, the metric as bars
        "viz_type": "echarts_timeseries_bar",
        "datasource": f"{dataset}__table",
        "x_axis": "region",
        "metrics": [metric],
        "groupby": [],
        "row_limit": 100,
        "adhoc_filters": [],
        "show_value": True,
        "x_axis_title": "region",
        "y_axis_title": "revenue",
    }
    chart = ss.call(
        "POST",
        "/api/v1/chart/",
        json={
            "slice_name": f"Revenue by region ({args.table})",
            "viz_type": "echarts_timeseries_bar",
            "datasource_id": dataset,
            "datasource_type": "table",
            "params": json.dumps(params),
        },
    )["id"]
    data = ss.call(
        "POST",
        "/api/v1/chart/data",
        json={
            "datasource": {"id": dataset, "type": "table"},
            "queries": [
                {"columns": ["region"], "metrics": [metric], "row_limit": 100, "orderby": [[metric, False]]}
            ],
            "result_format": "json",
            "result_type": "full",
        },
    )
    rows = data["result"][0]["data"]
    print(f"chart {chart} data: {rows}")
    if not rows:
        raise SystemExit("the chart's query returned no rows")
    step("SQL Lab: SHOW JOBS")
    shown = ss.call(
        "POST",
        "/api/v1/sqllab/execute/",
        json={"database_id": database, "sql": "SHOW JOBS", "schema": "public", "runAsync": False},
    )
    print(f"SHOW JOBS -> {shown.get('data')}")
    if args.drop:
        job, snapshot = args.drop.split(":")
        step(f"SQL Lab: DROP JOB {job} WITH SNAPSHOT {snapshot}")
        dropped = ss.call(
            "POST",
            "/api/v1/sqllab/execute/",
            json={
                "database_id": database,
                "sql": f"DROP JOB {job} WITH SNAPSHOT {snapshot}",
                "schema": "public",
                "runAsync": False,
            },
        )
        print(f"DROP JOB -> {dropped.get('status')}")
        listed = ss.call(
            "POST",
            "/api/v1/sqllab/execute/",
            json={"database_id": database, "sql": "SHOW SNAPSHOTS", "schema": "public", "runAsync": False},
        )
        print(f"SHOW SNAPSHOTS -> {listed.get('data')}")
    step(f"screenshot of the chart -> {args.screenshot}")
    screenshot(args, chart)
    print("ok")


def screenshot(args: argparse.Namespace, chart: int) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,900",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(f"{args.superset}/login/")
        wait = WebDriverWait(driver, 60)
        wait.until(ec.presence_of_element_located((By.ID, "username"))).send_keys(args.user)
        driver.find_element(By.ID, "password").send_keys(args.password + "\n")
        time.sleep(2)
        driver.get(f"{args.superset}/explore/?slice_id={chart}&standalone=1")
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "svg, canvas")))
        time.sleep(4)  # let the chart finish drawing
        driver.save_screenshot(args.screenshot)
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
