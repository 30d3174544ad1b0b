"""HCCL rank tables: version 1.0 for plain servers, 1.2 for an Atlas A3 super pod.

The 1.2 form is HCCL's (hicann/hccl docs/zh/user_guide/cluster_info_config/
rank_table_config_a3.md); the SDIDs are those of MindCluster's A3 hccl.json example
(tests/fixtures/spod_info/README.md).
"""

from __future__ import annotations

import json

from workers.contract.gang import dumps_rank_table, rank_table


def placement(server: str, indices: list[int], first_rank: int, **inventory: dict) -> dict:
    return {"server_id": server, "device_indices": indices, "first_rank": first_rank, **inventory}


def test_plain_servers_get_version_1_0_with_every_device_in_rank_order() -> None:
    table = rank_table(
        [
            placement("192.0.2.1", [4, 5], 0, device_ips={"4": "10.10.100.14"}),
            placement("192.0.2.2", [0, 1], 2, device_ips={}),
        ]
    )
    assert table == {
        "version": "1.0",
        "server_count": "2",
        "server_list": [
            {
                "server_id": "192.0.2.1",
                "device": [
                    {"device_id": "4", "device_ip": "10.10.100.14", "rank_id": "0"},
                    {"device_id": "5", "device_ip": "", "rank_id": "1"},
                ],
            },
            {
                "server_id": "192.0.2.2",
                "device": [
                    {"device_id": "0", "device_ip": "", "rank_id": "2"},
                    {"device_id": "1", "device_ip": "", "rank_id": "3"},
                ],
            },
        ],
        "status": "completed",
    }


def test_a3_servers_get_version_1_2_with_super_device_ids_and_their_super_pod() -> None:
    table = rank_table(
        [
            placement(
                "192.0.2.1",
                [0, 7],
                0,
                device_ips={"0": "10.20.0.2", "7": "10.20.0.9"},
                super_device_ids={"0": 37748736, "7": 38600711},
                super_pod_ids={"0": 0, "7": 0},
            ),
            placement(
                "192.0.2.2",
                [0, 7],
                2,
                device_ips={"0": "10.20.0.18", "7": "10.20.0.25"},
                super_device_ids={"0": 41943040, "7": 42795015},
                super_pod_ids={"0": 0, "7": 0},
            ),
        ]
    )
    assert table == {
        "version": "1.2",
        "server_count": "2",
        "server_list": [
            {
                "server_id": "192.0.2.1",
                "device": [
                    {
                        "device_id": "0",
                        "super_device_id": "37748736",
                        "device_ip": "10.20.0.2",
                        "rank_id": "0",
                    },
                    {
                        "device_id": "7",
                        "super_device_id": "38600711",
                        "device_ip": "10.20.0.9",
                        "rank_id": "1",
                    },
                ],
            },
            {
                "server_id": "192.0.2.2",
                "device": [
                    {
                        "device_id": "0",
                        "super_device_id": "41943040",
                        "device_ip": "10.20.0.18",
                        "rank_id": "2",
                    },
                    {
                        "device_id": "7",
                        "super_device_id": "42795015",
                        "device_ip": "10.20.0.25",
                        "rank_id": "3",
                    },
                ],
            },
        ],
        "super_pod_list": [
            {
                "super_pod_id": "0",
                "server_list": [{"server_id": "192.0.2.1"}, {"server_id": "192.0.2.2"}],
            }
        ],
        "status": "completed",
    }
    assert json.loads(dumps_rank_table(table)) == table


def test_servers_of_one_super_pod_stay_side_by_side_and_keep_their_ranks() -> None:
    def a3(server: str, first_rank: int, pod: int) -> dict:
        return placement(
            server,
            [0],
            first_rank,
            super_device_ids={"0": 16777216},
            super_pod_ids={"0": pod},
        )

    table = rank_table([a3("node-0", 0, 1), a3("node-1", 1, 0), a3("node-2", 2, 1)])
    assert [s["server_id"] for s in table["server_list"]] == ["node-0", "node-2", "node-1"]
    assert [s["device"][0]["rank_id"] for s in table["server_list"]] == ["0", "2", "1"]
    assert table["super_pod_list"] == [
        {"super_pod_id": "1", "server_list": [{"server_id": "node-0"}, {"server_id": "node-2"}]},
        {"super_pod_id": "0", "server_list": [{"server_id": "node-1"}]},
    ]
    # A super pod's devices need no IP (HCCS); an unknown one is left out, not "".
    assert table["server_list"][0]["device"][0] == {
        "device_id": "0",
        "super_device_id": "16777216",
        "rank_id": "0",
    }


def test_one_device_without_an_sdid_makes_the_whole_table_version_1_0() -> None:
    table = rank_table(
        [
            placement(
                "192.0.2.1",
                [0, 1],
                0,
                super_device_ids={"0": 37748736, "1": 37814273},
                super_pod_ids={"0": 0, "1": 0},
            ),
            placement(
                "192.0.2.2",
                [0, 1],
                2,
                super_device_ids={"0": 41943040},
                super_pod_ids={"0": 0},
            ),
        ]
    )
    assert table["version"] == "1.0"
    assert "super_pod_list" not in table
    assert all("super_device_id" not in d for s in table["server_list"] for d in s["device"])


def test_each_devices_id_is_its_physical_id_where_its_host_knows_it() -> None:
    """HCCL's device_id is the physical id (``ls /dev/davinci*``): a container that maps the
    host's devices 4 and 5 as its 0 and 1 leases 0 and 1, and the table names 4 and 5."""
    table = rank_table(
        [
            placement("192.0.2.1", [0, 1], 0, device_phy_ids={"0": 4, "1": 5}),
            # A host whose npu-smi prints no physical id (Atlas A2): its indices stand in.
            placement("192.0.2.2", [0, 1], 2, device_phy_ids={}),
        ]
    )
    assert [[d["device_id"] for d in s["device"]] for s in table["server_list"]] == [
        ["4", "5"],
        ["0", "1"],
    ]
    assert [d["rank_id"] for d in table["server_list"][0]["device"]] == ["0", "1"]


def test_a_super_pod_table_names_the_physical_ids_too() -> None:
    table = rank_table(
        [
            placement(
                "192.0.2.1",
                [0, 1],
                0,
                device_phy_ids={"0": 6, "1": 7},
                super_device_ids={"0": 38535174, "1": 38600711},
                super_pod_ids={"0": 0, "1": 0},
            )
        ]
    )
    assert table["version"] == "1.2"
    assert [(d["device_id"], d["super_device_id"]) for d in table["server_list"][0]["device"]] == [
        ("6", "38535174"),
        ("7", "38600711"),
    ]
