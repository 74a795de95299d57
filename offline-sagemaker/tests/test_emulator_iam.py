"""IAM SimulatePrincipalPolicy at the offline SageMaker (the SDK's role check); the rest of IAM is moto's."""

from __future__ import annotations

import json

from offline_sagemaker import OfflineSageMaker

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


def test_simulate_principal_policy_answers_in_aws_shape_allowed_unless_the_scenario_denies(
    load_frozen: object,
) -> None:
    world: OfflineSageMaker = load_frozen(iam_denied_actions=["s3:PutObject"])  # type: ignore[operator]
    iam = world.boto3_client("iam")
    result = iam.simulate_principal_policy(
        PolicySourceArn=ROLE,
        ActionNames=["s3:GetObject", "s3:PutObject"],
        ResourceArns=["arn:aws:s3:::bucket/*"],
    )
    assert result["IsTruncated"] is False
    assert [
        (r["EvalActionName"], r["EvalResourceName"], r["EvalDecision"]) for r in result["EvaluationResults"]
    ] == [
        ("s3:GetObject", "arn:aws:s3:::bucket/*", "allowed"),
        ("s3:PutObject", "arn:aws:s3:::bucket/*", "implicitDeny"),
    ]
    # Every other IAM call still reaches moto, body intact.
    trust = {"Version": "2012-10-17", "Statement": []}
    iam.create_role(RoleName="EmulatorIamCheck", AssumeRolePolicyDocument=json.dumps(trust))
    assert iam.get_role(RoleName="EmulatorIamCheck")["Role"]["RoleName"] == "EmulatorIamCheck"
    iam.delete_role(RoleName="EmulatorIamCheck")
