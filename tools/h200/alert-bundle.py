"""The shipped Alertmanager configuration for alert-run.sh, prepared on the
build machine (make h200-alert-bundle; the GPU machine has no PyYAML):

    alert-bundle.py ALERTMANAGER_YML OUT

Only the receivers change: each one's notifiers are replaced by one
webhook, http://webhook.invalid/<receiver name>, with send_resolved
(alert-run.sh puts the webhook's address in). The routes, the grouping, the
timings and the inhibitions stay as shipped, and the path a notification
arrives on names the receiver the routes chose.
"""
import sys

import yaml


def main(src, dst):
    with open(src) as f:
        cfg = yaml.safe_load(f)
    names = []
    for r in cfg.get("receivers") or []:
        name = r["name"]
        names.append(name)
        r.clear()
        r["name"] = name
        r["webhook_configs"] = [{"url": "http://webhook.invalid/" + name, "send_resolved": True}]
    if not names:
        sys.exit(f"{src}: no receivers")
    # Templates are read relative to the configuration's folder: the
    # rewritten file lives elsewhere, so alert-run.sh gives the repository.
    if cfg.get("templates"):
        cfg["templates"] = ["__REPO__/deploy/alertmanager/" + t for t in cfg["templates"]]
    with open(dst, "w") as f:
        f.write(f"# {src} with every receiver a webhook (tools/h200/alert-bundle.py)\n")
        yaml.safe_dump(cfg, f, sort_keys=False)
    print(f"{dst}: receivers {', '.join(names)} -> webhook")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
