ALTER TABLE `upstream_links` ADD `previous_user_id` text;--> statement-breakpoint
ALTER TABLE `upstream_links` ADD `previous_region` text;